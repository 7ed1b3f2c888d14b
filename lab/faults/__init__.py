"""Purpose-built Streamable HTTP servers whose faults are switches (`lab.faults.server`, and
`lab.faults.modern` for 2026-07-28).

Scenarios start them through `lab.faults.launch`; this package stays import-light so that
each replica process starts fast.
"""
