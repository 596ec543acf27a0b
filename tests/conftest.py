"""Test setup: report the adapter, enforce lavapipe in CI, helpers shared by the suite."""

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import wgcompute as wgc  # noqa: E402


def pytest_report_header(config):
    info = wgc.device_info()
    return f"wgcompute adapter: {info['name']} ({info['backend']}, {info['adapter_type']})"


def pytest_sessionstart(session):
    if os.environ.get("EXPECT_LAVAPIPE") == "1":
        info = wgc.device_info()
        if "llvmpipe" not in info["name"].lower() or info["backend"] != "Vulkan":
            raise pytest.UsageError(
                f"EXPECT_LAVAPIPE=1 but the adapter is {info['name']} ({info['backend']})")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def has_feature(name: str) -> bool:
    return name in wgc.device_info()["features"]
