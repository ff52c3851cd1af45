"""carpool on a laptop: the simulation, in three rooms named for what they stand in for.

- `carpool.sim.cluster`: the Kubernetes cluster (an in-memory API server and its HTTP face, kubelets, the
  AMIs' node boot, DaemonSet agents, the workload's controllers).
- `carpool.sim.localaws`: AWS (moto's server set up like the stack, the checked speed-ups of moto's
  internals, the Lambda runtime and SQS event source mapping, request recording for the IAM check).
  Nothing outside it imports moto.
- `carpool.sim.run`: one simulation (the scenario, the runner, discrete events, faults, the result, its
  summary, report and own cost). Only the run knows all three; the cluster and local AWS import neither
  the run nor each other.

What every room reads sits here, importing none of them: simulated time (`clock`) and the conventions of
the scenario file's sections (`yaml_model`). `tests/unit/sim/test_sim_rooms.py` holds the rule.
"""
