"""GAE and the valid mask against an independent plain-Python oracle and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from algos.returns import gae, valid_mask


def gae_oracle(v, r, term, trunc, gamma, lam):
    """One env at a time, backwards, with Python floats (CleanRL's loop, per transition flags)."""
    T, B = r.shape
    out = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if term[t, b] else float(v[t + 1, b])
            delta = float(r[t, b]) + gamma * bootstrap - float(v[t, b])
            carry = 0.0 if (term[t, b] or trunc[t, b]) else running
            running = delta + gamma * lam * carry
            out[t, b] = running
    return out


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0), (0.5, 0.7)])
def test_gae_matches_oracle_with_terminations_and_truncations(gamma, lam):
    rng = np.random.default_rng(int(gamma * 100 + lam * 10))
    T, B = 37, 6
    v = rng.normal(size=(T + 1, B)).astype(np.float32)
    r = rng.normal(size=(T, B)).astype(np.float32)
    term = rng.random((T, B)) < 0.1
    trunc = (rng.random((T, B)) < 0.1) & ~term
    assert term.any() and trunc.any()
    got = np.asarray(gae(v, r, term, trunc, gamma, lam))
    assert got.shape == (T, B) and got.dtype == np.float32
    np.testing.assert_allclose(got, gae_oracle(v, r, term, trunc, gamma, lam), rtol=1e-5, atol=1e-5)


def test_gae_hand_computed_termination():
    # gamma = lam = 0.5, v = [1, 2, 3, 4], r = 1, transition 1 terminates.
    # t=2: 1 + .5*4 - 3 = 0;  t=1: 1 + 0 - 2 = -1 (no bootstrap, no carry);  t=0: (1 + .5*2 - 1) + .25*(-1) = 0.75
    v = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    r = np.ones((3, 1), np.float32)
    term = np.array([[False], [True], [False]])
    got = np.asarray(gae(v, r, term, np.zeros_like(term), 0.5, 0.5))
    np.testing.assert_allclose(got[:, 0], [0.75, -1.0, 0.0], atol=1e-6)


def test_gae_hand_computed_truncation_bootstraps_but_cuts_the_trace():
    # transition 1 truncated: delta_1 = 1 + .5*3 - 2 = 0.5 (bootstraps from the final obs), A_1 = 0.5
    # A_0 = (1 + .5*2 - 1) + .25*0.5 = 1.125;  A_2 = 1 + .5*4 - 3 = 0
    v = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    r = np.ones((3, 1), np.float32)
    trunc = np.array([[False], [True], [False]])
    got = np.asarray(gae(v, r, np.zeros_like(trunc), trunc, 0.5, 0.5))
    np.testing.assert_allclose(got[:, 0], [1.125, 0.5, 0.0], atol=1e-6)


def test_valid_mask_marks_reset_steps():
    # rows:       0      1     2      3     4
    term = np.array([False, True, False, False, False])[:, None]
    trunc = np.array([False, False, False, True, False])[:, None]
    mask = np.asarray(valid_mask(term, trunc))
    assert mask.shape == (4, 1) and mask.dtype == np.float32
    np.testing.assert_array_equal(mask[:, 0], [1.0, 0.0, 1.0, 0.0])


def test_valid_advantages_ignore_reset_step_data():
    """The reward that led to a reset row (transition out of a done row) never reaches valid advantages."""
    rng = np.random.default_rng(3)
    T, B = 20, 4
    term_rows = rng.random((T + 1, B)) < 0.15
    trunc_rows = (rng.random((T + 1, B)) < 0.1) & ~term_rows
    term_rows[0] = trunc_rows[0] = False
    v = rng.normal(size=(T + 1, B)).astype(np.float32)
    r_rows = rng.normal(size=(T + 1, B)).astype(np.float32)
    mask = np.asarray(valid_mask(term_rows, trunc_rows))
    adv = np.asarray(gae(v, r_rows[1:], term_rows[1:], trunc_rows[1:], 0.99, 0.95))

    reset = np.zeros((T + 1, B), bool)
    reset[1:] = mask == 0  # rows that follow a done row
    r2 = np.where(reset, 123.0, r_rows).astype(np.float32)
    assert reset.any()
    adv2 = np.asarray(gae(v, r2[1:], term_rows[1:], trunc_rows[1:], 0.99, 0.95))
    np.testing.assert_allclose(adv2 * mask, adv * mask, rtol=1e-5, atol=1e-5)
