"""Code shared by every Modelplane composition function.

- ``runtime``: the command line every function starts with.
- ``function``: the gRPC servicer base class that turns a pure ``compose`` step into a
  RunFunction response, and never lets an exception become a lost desired state.
- ``plain``: protobuf Struct <-> plain JSON-like Python, with whole numbers kept as ints.
- ``naming``: the deterministic child-name rule (platform spec C1).
"""
