"""The float64 tables of complex128 transforms, made on the host (WGSL's sines and cosines are
float32 only on Vulkan): Stockham's twiddles and Bluestein's chirps, kept on each device."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ...buffer import buffer
from ...dtypes import DTYPES
from .fft import table_bits

# what a device keeps of these tables at most (least recently used dropped first): a
# twiddle table is about 32·sqrt(n) bytes, a Bluestein one 16·m (m < 4n)
CACHE_BYTES = 64 << 20
_LOCK = threading.Lock()


def _turns(num: np.ndarray, den: int) -> np.ndarray:
    """exp(-2πi · num / den), num integers (reduced mod den here), in long double where the
    platform has it, rounded once to complex128."""
    f = np.asarray(num, np.int64) % den
    f = np.where(2 * f >= den, f - den, f).astype(np.longdouble) / den  # [-1/2, 1/2) turns
    a = -2 * np.pi * f if np.longdouble == np.float64 else \
        np.longdouble(-2) * np.arccos(np.longdouble(-1)) * f
    return (np.cos(a).astype(np.float64) + 1j * np.sin(a).astype(np.float64)).astype(
        np.complex128)


def twiddles(n: int) -> np.ndarray:
    """W^j = exp(-2πi·j/n) as fft_pass_c128 reads it: W^j for j < B, then W^(B·j) for
    j < ceil(n / B) (B = 2^table_bits(n)), so that W^j = w[j mod B] · w[B + j / B]."""
    b = 1 << table_bits(n)
    return np.concatenate([_turns(np.arange(b), n), _turns(np.arange(-(-n // b)) * b, n)])


def chirp(n: int, m: int, sign: int) -> np.ndarray:
    """Bluestein's w(t) = exp(sign·iπ·t²/n) for t < n, then zeros up to m."""
    t = np.arange(n, dtype=np.int64)
    w = _turns(-sign * ((t * t) % (2 * n)), 2 * n)
    return np.concatenate([w, np.zeros(m - n, np.complex128)])


def chirp_spectrum(n: int, m: int, sign: int, scale: float) -> np.ndarray:
    """The DFT of Bluestein's kernel conj(w(t)) (t and m - t for t < n), times scale / m: the
    factor of the product between the two transforms of length m (the inverse unscaled)."""
    w = np.conj(chirp(n, m, sign))
    b = w.copy()
    b[m - n + 1:] = w[1:n][::-1]
    return np.fft.fft(b) * (scale / m)


def table(device, kind: str, *args):
    """The complex128 Buffer of table ``kind`` ("twiddles", "chirp", "chirp_spectrum") for
    ``args`` on ``device``: made and uploaded once, then the same Buffer while the device's
    cache holds it (CACHE_BYTES at most)."""
    key = (kind, *args)
    with _LOCK:
        cache = device.extras.get("fft_tables")
        if cache is None:
            cache = device.extras["fft_tables"] = OrderedDict()
        hit = cache.get(key)
        if hit is not None and not hit.freed:
            cache.move_to_end(key)
            return hit
    values = {"twiddles": twiddles, "chirp": chirp, "chirp_spectrum": chirp_spectrum}[kind](*args)
    made = buffer(values, dtype=DTYPES["c128"], label=f"fft-{kind}", device=device)
    with _LOCK:
        cache[key] = made
        total = sum(b.nbytes for b in cache.values())
        while total > CACHE_BYTES and len(cache) > 1:  # dropped, not freed: work in flight
            _, old = cache.popitem(last=False)  # may still hold it
            total -= old.nbytes
    return made
