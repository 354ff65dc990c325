"""Porter: move GPU kernels between vendors, make them faster, and prove every result on real hardware."""

__version__ = "0.1.0"
