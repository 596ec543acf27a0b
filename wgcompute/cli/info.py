"""`wgcompute info`: the device table."""

from __future__ import annotations

import json

import wgcompute as wgc

DESCRIPTION = "Print the adapter wgcompute uses, every adapter found, features and limits."

_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size",
           "max-compute-workgroup-storage-size", "max-compute-invocations-per-workgroup",
           "max-compute-workgroups-per-dimension")


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print device_info() as JSON")


def run(args) -> int:
    info = wgc.device_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    rows = [("name", info["name"]), ("vendor", info["vendor"]), ("backend", info["backend"]),
            ("adapter type", info["adapter_type"]), ("real GPU", "yes" if info["gpu"] else "no"),
            ("driver", info["driver"]), ("wgcompute", info["version"]),
            ("wgpu", info["wgpu_version"]),
            ("features", ", ".join(f for f in info["features"]))]
    rows += [(k, f"{info['limits'][k]:,}") for k in _LIMITS if k in info["limits"]]
    width = max(len(k) for k, _ in rows)
    print("device")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    print("adapters found")
    for a in wgc.adapters():
        mark = "*" if a["name"] == info["name"] and a["backend"] == info["backend"] else " "
        print(f" {mark} {a['name']}  [{a['backend']}, {a['adapter_type']}]")
    return 0
