"""The variation matrix (issue #25): each fault as a family of wire shapes, judged by the fault.

`variants` walks the axes and samples them per seed, `oracle` derives each variant's expected
detectors from the fault it injects (never from the analyzer), `server` plays each variant's
wire choices per session, `client` drives one variant through the proxy, and `run` starts the
server and one `seamwatch proxy`, runs a sample, analyzes the one capture and prints the
confusion table per detector (`seamwatch lab matrix`).
"""
