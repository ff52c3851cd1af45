"""Local AWS: moto's server on 127.0.0.1 set up like the stack (`server`), the fingerprinted speed-ups of
moto's internals (`moto_patches` and the modules that declare patches), the Lambda runtime and SQS event
source mapping (`lambda_runtime`, `event_source`) and request recording for the IAM check (`requests`).
The only part of carpool that imports moto; imports neither the run nor the cluster."""
