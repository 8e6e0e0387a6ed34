"""The JAX core: contracts (types), meshes, the learner reductions, keys, how a train state lies on
the learner devices, many hosts, populations, errors and non-finite checks."""
