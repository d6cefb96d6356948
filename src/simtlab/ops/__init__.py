"""Problem definitions per kernel family: sizes, FLOP/byte counts, launch
geometry of each rung, inputs, and the references rungs are checked and
timed against. GPU libraries are imported inside functions, so these modules
load on a machine with no GPU (static reports need the geometry)."""
