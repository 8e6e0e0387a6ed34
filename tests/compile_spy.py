"""Which programs XLA compiles: a spy on JAX's one call into the compiler.

A program JAX finds in the persistent compilation cache, or loads from process 0 of a pod
(`podrl.core.shared_compiles`), is not compiled, so it is not counted: the tests use this to
prove that a program was reused, not built again.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


def spy_compiles(keep: Callable[[Sequence[Any]], bool] = lambda devices: True,
                 patch: Callable[[Any, str, Any], None] = setattr) -> list[str]:
    """The names (`jit__call_shard`, ...) of the programs XLA compiles from now on whose devices
    pass `keep`, appended as they are compiled. `patch(module, name, value)` installs the spy:
    `setattr` for the rest of the process, a test's `monkeypatch.setattr` until the test ends."""
    from jax._src import compiler

    names, compile_and_load = [], compiler.backend_compile_and_load

    def counting(backend, module, executable_devices, *args, **kwargs):
        if keep(executable_devices):
            names.append(str(module.operation.attributes["sym_name"]).strip('"'))
        return compile_and_load(backend, module, executable_devices, *args, **kwargs)

    patch(compiler, "backend_compile_and_load", counting)
    return names
