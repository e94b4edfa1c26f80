"""Where the import package's files are (setuptools reads the rest from pyproject.toml).

`synconfroute` is synconfroute/ (its __init__ and __main__); `synconfroute.server` is the
top-level server/ folder and `synconfroute.clients` is clients/, with every subpackage
found in them. A package-dir mapping, not the synconfroute/server and synconfroute/clients
links: a clone without symlink support (git's default on Windows) has small text files
where the links were, and a build that followed the links made a wheel holding only
__init__ and __main__. The mapping names the real folders, so every build holds them, and
an incomplete tree stops the build with the reason.
"""

from pathlib import Path

from setuptools import find_packages, setup

HALVES = {"synconfroute.server": "server", "synconfroute.clients": "clients"}


def _packages() -> list[str]:
    here = Path(__file__).resolve().parent
    found = ["synconfroute"]
    for name, folder in HALVES.items():
        if not (here / folder / "__init__.py").is_file():
            raise SystemExit(
                f"synconfroute: {folder}/__init__.py is missing, so {name} would be left out "
                "of the package; build from a complete checkout or sdist"
            )
        found += [name, *(f"{name}.{sub}" for sub in find_packages(str(here / folder)))]
    return found


setup(packages=_packages(), package_dir={"synconfroute": "synconfroute", **HALVES})
