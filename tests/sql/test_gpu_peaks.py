"""Device names matched to int_gpu_peaks on the whole model number: one name per family as deviceProperties
writes it (the names of public traces and of the vendors' tools), and the near names that must not match."""

from __future__ import annotations

import duckdb
import pytest

from transforms.models import discover_models

NAMES = {
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H200": "NVIDIA H200 SXM",
    "NVIDIA GH200 480GB": "NVIDIA GH200",
    "NVIDIA H20": "NVIDIA H20",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 80GB SXM",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 40GB PCIe",
    "NVIDIA A100-PG509-200": "NVIDIA A100 40GB SXM",
    "Tesla V100-SXM2-16GB": "NVIDIA V100 SXM2",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA A10": "NVIDIA A10",
    "Tesla T4": "NVIDIA T4",
    "NVIDIA B200": "NVIDIA B200",
    "NVIDIA GB200": "NVIDIA GB200",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
    "AMD Instinct MI325X": "AMD Instinct MI325X",
    "AMD Instinct MI355X": "AMD Instinct MI355X",
    "AMD Instinct MI250X/MI250": "AMD Instinct MI250X",
    "AMD Instinct MI210": "AMD Instinct MI210",
    # near names of other parts: none of the table's rows is theirs
    "NVIDIA L40S": None,
    "NVIDIA A10G": None,
    "NVIDIA RTX A5000": None,
    "Quadro GP100": None,
}


def _model(name: str) -> str | None:
    con = duckdb.connect()
    con.execute(f"create view int_gpu_peaks as {discover_models()['int_gpu_peaks'].sql}")
    row = con.execute(
        "select model from int_gpu_peaks where regexp_matches($name, name_pattern, 'i') order by priority limit 1",
        {"name": name}).fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("name", NAMES)
def test_device_name_finds_its_family(name: str) -> None:
    assert _model(name) == NAMES[name]
