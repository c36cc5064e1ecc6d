"""Derived datatypes: constructors, queries, packing, point-to-point with
non-contiguous types, partial receives, and error cases."""
import pytest

from conftest import assert_ok, run


def test_every_constructor_has_the_standard_size_bounds_contents_and_type_map(build):
    assert_ok(run(1, build("dtype_constructors")))
