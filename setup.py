"""Packaging beyond pyproject.toml: tahoe installs `tahoe-pyspark-hook.pth` next to its packages (a
`.pth` file in site-packages runs its `import` line at interpreter start-up: see
`_tahoe_pyspark_hook`), in a wheel and in an editable install."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "tahoe-pyspark-hook.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


def _pth_contents() -> bytes:
    with open(os.path.join(HERE, PTH), "rb") as f:
        return f.read()


class BuildPyWithPth(build_py):
    """A wheel: the `.pth` at the root of the build directory, i.e. in site-packages."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [os.path.join(self.build_lib, PTH)]


cmdclass = {"build_py": BuildPyWithPth}

try:
    from setuptools.command.editable_wheel import editable_wheel

    class EditableWheelWithPth(editable_wheel):
        """An editable install (`pip install -e .`): the `.pth` written into the editable wheel
        beside setuptools' own `__editable__` one."""

        def _select_strategy(self, *args, **kwargs):
            inner = super()._select_strategy(*args, **kwargs)

            class WithPth:
                def __enter__(self):
                    inner.__enter__()
                    return self

                def __exit__(self, *exc):
                    return inner.__exit__(*exc)

                def __call__(self, wheel, files, mapping):
                    inner(wheel, files, mapping)
                    wheel.writestr(PTH, _pth_contents())

            return WithPth()

    cmdclass["editable_wheel"] = EditableWheelWithPth
except ImportError:  # an old setuptools: editable installs go without the hook
    pass

setup(cmdclass=cmdclass)
