"""One simulation: the scenario file (`scenario`), the runner that plays it against the cluster and local
AWS (`runner`), its discrete events, faults and invocation costs, and what it produced (`result`, `summary`,
`report`, `own_cost`). The only room that imports the other two."""
