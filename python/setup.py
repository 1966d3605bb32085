# SPDX-License-Identifier: MIT
#
# Builds kpack._kpack, the C extension over librocm_kpack.a. The library,
# its flags and the version come from the top-level Makefile (`make
# python-config`), the one place they are written: the extension is
# compiled with the library's flags (warnings as errors, and SANITIZE when
# the environment's KPACK_SANITIZE names sanitizers) and linked with the
# static library, msgpack-c statically and libzstd and zlib shared.
# Build products go to the Makefile's build tree (BUILD/python), not here;
# the environment's KPACK_BUILD and KPACK_CC, which the Makefile exports,
# choose BUILD (default build) and CC.
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(HERE)


def make(*args, capture=False):
    if not os.path.exists(os.path.join(ROOT, "Makefile")):
        sys.exit(f"setup.py: {ROOT} has no Makefile: kpack's Python package "
                 "builds only from a checkout of the kpack repository")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    cmd = ["make", "--no-print-directory", "-C", ROOT,
           "SANITIZE=" + os.environ.get("KPACK_SANITIZE", ""),
           "BUILD=" + os.environ.get("KPACK_BUILD", "build"),
           *(["CC=" + os.environ["KPACK_CC"]] if os.environ.get("KPACK_CC")
             else []),
           *args]
    try:
        done = subprocess.run(cmd, env=env, check=True, text=True,
                              stdout=subprocess.PIPE if capture else None)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"setup.py: {shlex.join(cmd)} failed: {e}")
    return done.stdout


config = dict(line.split("=", 1)
              for line in make("-s", "python-config", capture=True).splitlines()
              if "=" in line)
make("-j%d" % min(os.cpu_count() or 1, 4),
     os.path.relpath(config["static_lib"], ROOT))

build_dir = os.path.join(config["build"], "python")
os.makedirs(build_dir, exist_ok=True)

setup(
    version=config["version"],
    ext_modules=[
        Extension(
            "kpack._kpack",
            sources=["_kpack.c"],
            include_dirs=[config["include"]],
            extra_compile_args=shlex.split(config["cppflags"])
            + shlex.split(config["cflags"]),
            extra_link_args=[config["static_lib"]]
            + shlex.split(config["libs"])
            + shlex.split(config["ldflags"]),
            depends=[config["static_lib"]],
        )
    ],
    options={
        "build": {"build_base": os.path.join(build_dir, "setuptools")},
        "egg_info": {"egg_base": build_dir},
    },
)
