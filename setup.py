"""Build of the optional C kernels; all metadata lives in pyproject.toml.

The extension is ``optional``: without a compiler (or Python headers) installation still
succeeds, and kafkalog runs on its pure-Python kernels, saying so once at import.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalog.format._speedups",
            sources=["src/kafkalog/format/_speedups.c"],
            extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wno-missing-braces"],
            optional=True,
        )
    ]
)
