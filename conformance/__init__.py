"""The agentflow conformance suite: recorded cases, a checking replay server, a runner.
See conformance/README.md."""
