"""Environment management: init/finalize, thread levels, versions, timers."""
import pytest

from conftest import NPROCS, assert_ok, run


@pytest.mark.parametrize("nprocs", NPROCS)
def test_init_finalize_queries_versions_and_timers_are_correct(build, nprocs, paths):
    res = run(nprocs, build("basic"), mpiexec_opts=paths, env={"EXPECT_SIZE": str(nprocs)})
    assert_ok(res)


@pytest.mark.parametrize("level", ["single", "funneled", "serialized"])
def test_init_thread_provides_at_least_the_requested_level(build, level):
    assert_ok(run(2, build("basic"), level, env={"EXPECT_SIZE": "2"}))


def test_alloc_mem_gives_usable_memory_and_rejects_a_negative_size(build):
    assert_ok(run(2, build("memory")))


def test_is_thread_main_is_true_only_on_the_initializing_thread(build):
    assert_ok(run(2, build("thread_main")))
