"""The generator of porter's CUDA -> HIP API tables and its extracted inputs (see generate.py)."""
