"""The agentflow conformance suite: recorded cases (``loader``), a checking runner
(``runner``), agentflow driven through a case (``driver``, also behind the reference
adapter) and the trace and Mermaid diagram of ``agentflow replay`` (``trace``).
See conformance/README.md."""
