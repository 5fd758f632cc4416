"""Choosing a saver: shipped providers by dotted path, a deployment's own class, bad paths."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import CheckpointConfigError
from checkpoints.store.memory import STORE, MemorySaver
from checkpoints.store.registry import PROVIDERS, get_saver


class AuditedSaver(MemorySaver):
    """A deployment's own saver: the memory store, counting the puts it took."""

    provider = "audited"
    puts = 0

    def _store_checkpoint(self, plan):
        type(self).puts += 1
        super()._store_checkpoint(plan)


def checkpoints(**overrides) -> dict:
    return {**settings.CHECKPOINTS, **overrides}


@pytest.fixture(autouse=True)
def empty_memory_store():
    STORE.clear()
    yield
    STORE.clear()


def test_a_deployment_names_its_own_saver_class():
    path = f"{__name__}.AuditedSaver"
    with override_settings(CHECKPOINTS=checkpoints(SAVERS={"audited": path})):
        saver = get_saver("audited")
        assert type(saver) is AuditedSaver
        before = AuditedSaver.puts
        checkpoint = empty_checkpoint()
        stored = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, checkpoint, {}, {}
        )
        assert AuditedSaver.puts == before + 1
        assert saver.get_tuple(stored).checkpoint["id"] == checkpoint["id"]
        # The shipped providers are still there.
        assert type(get_saver("memory")) is MemorySaver


def test_a_deployment_may_replace_a_shipped_provider_and_select_its_own():
    path = f"{__name__}.AuditedSaver"
    with override_settings(CHECKPOINTS=checkpoints(SAVERS={"memory": path})):
        assert type(get_saver("memory")) is AuditedSaver
    with override_settings(CHECKPOINTS=checkpoints(PROVIDER="audited", SAVERS={"audited": path})):
        call_command("check")
        assert type(get_saver()) is AuditedSaver


def test_a_saver_path_that_does_not_import_is_a_configuration_error_naming_it():
    with override_settings(CHECKPOINTS=checkpoints(SAVERS={"mine": "no_such_module.Saver"})):
        with pytest.raises(SystemCheckError) as caught:
            call_command("check")
        output = str(caught.value)
        assert "checkpoints.E007" in output
        assert "CHECKPOINTS['SAVERS']['mine'] is 'no_such_module.Saver'" in output
        with pytest.raises(CheckpointConfigError, match="'no_such_module.Saver'"):
            get_saver("mine")


def test_an_unknown_provider_names_every_one_there_is():
    with pytest.raises(CheckpointConfigError) as caught:
        get_saver("nosuch")
    for provider in PROVIDERS:
        assert provider in str(caught.value)


class KeptSaver(MemorySaver):
    """A deployment's saver that keeps what it stores (elsewhere, say)."""

    provider = "kept"
    process_local = False


@pytest.mark.parametrize(
    ("provider", "saver", "warned"),
    [("audited", "AuditedSaver", True), ("kept", "KeptSaver", False), ("sqlite", None, False)],
)
def test_the_deploy_warning_follows_the_savers_capability_not_its_name(
    capsys, provider, saver, warned
):
    savers = {provider: f"{__name__}.{saver}"} if saver else {}
    with override_settings(CHECKPOINTS=checkpoints(PROVIDER=provider, SAVERS=savers)):
        call_command("check", deploy=True, fail_level="CRITICAL")
    captured = capsys.readouterr()
    assert ("checkpoints.W001" in captured.out + captured.err) is warned
    if warned:
        assert f"LLM_PROVIDER_CHECKPOINT is {provider!r}" in captured.out + captured.err
