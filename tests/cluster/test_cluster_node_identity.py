"""A restarted instance is the same node (its data dir keeps the id); a second process on
the same data dir is a different one."""

from pathlib import Path

from engine.cluster.nodes import stable_node_id


def test_the_id_survives_a_restart_and_follows_the_region(tmp_path: Path) -> None:
    first, lock = stable_node_id(tmp_path, "eu")
    assert first.startswith("eu-") and lock is not None
    lock.close()  # the process ends
    again, lock = stable_node_id(tmp_path, "eu")
    assert again == first
    assert lock is not None
    lock.close()
    moved, lock = stable_node_id(tmp_path, "us")  # reconfigured to another region
    assert moved.startswith("us-") and moved != first
    assert lock is not None
    lock.close()


def test_a_second_process_on_the_same_data_dir_gets_its_own_id(tmp_path: Path) -> None:
    first, lock = stable_node_id(tmp_path, "eu")
    second, other_lock = stable_node_id(tmp_path, "eu")
    assert other_lock is None and second != first and second.startswith("eu-")
    assert lock is not None
    lock.close()
