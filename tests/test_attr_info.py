"""Attributes and keyvals, info objects, object names."""
import pytest

from conftest import IS_RESMPI, assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_attribute_callbacks_run_on_dup_free_delete_and_finalize(build, nprocs):
    assert_ok(run(nprocs, build("attr"), timeout=60))


@pytest.mark.parametrize("nprocs", [1, 3])
def test_info_objects_keep_order_truncate_values_and_names_round_trip(build, nprocs):
    assert_ok(run(nprocs, build("info"), timeout=60))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_info_functions_work_before_init_and_after_finalize(build, nprocs):
    assert_ok(run(nprocs, build("info_preinit")))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_datatype_attribute_callbacks_run_on_dup_free_delete_and_replacement(build, nprocs):
    strict = ("strict",) if IS_RESMPI else ()
    assert_ok(run(nprocs, build("type_attr"), *strict, timeout=60))
