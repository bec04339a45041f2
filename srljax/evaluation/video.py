"""Video of one evaluation episode (``eval.video``): env 0's first episode of every evaluation.

    recorder = VideoRecorder(cfg)            # once, with the evaluator; ``recorder.note``: why nothing is recorded
    recorder.begin(env)                      # each evaluation, right after envs.make: frames of env 0 from now on
    recorder.capture(ts)                     # after reset and after every step; stops when env 0's episode ends
    path = recorder.write(version)           # RUN_DIR/videos/version-<v>.gif (None: nothing to write)

Where frames come from: a ``VecEnv`` with a ``render(env_id) -> [H, W, 3] uint8`` method (a user's
``env.factory`` env may define one), else envpool's own ``render``: an envpool pool renders when it was
made with ``render_mode="rgb_array"``, which only sets the pool's ``_render_mode`` attribute for tasks
whose spec has no render keys (Atari, classic control), so ``begin`` sets it on the evaluation's pool
rather than building another env (the env seam, ``envs.make``, has no render option). MuJoCo is
skipped with a note: envpool 1.2.5 renders it only inside an OpenGL context the process made first
(the ``mujoco`` package's ``GLContext``, not installed here), and rendering without one ends the
process. Multi-agent envpool tasks are skipped with a note too.

The file is an animated GIF written with Pillow (no mp4 encoder is installed: no ffmpeg, imageio or
PyAV); without Pillow the frames go to ``version-<v>.npz`` (``frames`` [T, H, W, 3] uint8). Frames
wider or taller than ``MAX_SIDE`` pixels are subsampled by a whole factor (CartPole's 600x400 ->
300x200; Atari's 210x160 stays). At most ``eval.video_max_frames`` frames are kept per video.
Recording does not change what is evaluated: the same actions, the same returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

VIDEO_DIR = "videos"
MAX_SIDE = 320  # pixels: larger frames are subsampled to keep a video's memory and file small
FPS = 25  # 40 ms a frame: GIF durations are whole centiseconds


def _envpool_pool(env: Any) -> Any:
    """The envpool pool under ``env`` (through wrappers that keep theirs in ``inner``), or None."""
    from envs.envpool_env import EnvpoolVecEnv

    while not isinstance(env, EnvpoolVecEnv):
        env = getattr(env, "inner", None)
        if env is None:
            return None
    return env._env


def render_problem(cfg: Any) -> str | None:
    """Why ``cfg.env`` gives no frames for a video (None: it does), decided without building or rendering an env."""
    e = cfg.env
    if e.factory:
        return None  # decided at the first evaluation: its env may have a render(env_id) method
    from envs.multi_agent import is_multi_agent_envpool

    if is_multi_agent_envpool(e.id):
        return f"eval.video: {e.id} is a multi-agent envpool task; its video is not built (skipped)"
    import envpool.registration

    found = envpool.registration.registry.specs.get(e.id)
    if found is not None and "mujoco" in found[0]:
        return (f"eval.video: {e.id} is a MuJoCo task, which envpool renders only inside an OpenGL context the "
                "process creates first (the `mujoco` package's GLContext, not installed here; rendering without "
                "it ends the process): no video (skipped)")
    return None


class VideoRecorder:
    """Frames of env 0's first episode of an evaluation, written per version (see the module docstring)."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.note = render_problem(cfg)
        self.frames: list[np.ndarray] = []
        self.recording = False
        self._render: Any = None

    def begin(self, env: Any) -> None:
        """Start recording env 0 of ``env`` (a fresh evaluation env, before its ``reset``)."""
        self.frames, self.recording, self._render = [], False, None
        if self.note is not None:
            return
        if callable(getattr(env, "render", None)):
            self._render = lambda: env.render(0)
        elif (pool := _envpool_pool(env)) is not None:
            if getattr(pool, "_render_mode", None) is None:
                pool._render_mode = "rgb_array"  # what envpool.make(render_mode="rgb_array") sets (module docstring)
            self._render = lambda: pool.render(env_ids=[0])[0]
        else:
            self.note = (f"eval.video: the env of env.factory={self.cfg.env.factory!r} has no render(env_id) method "
                         "returning an [H, W, 3] uint8 frame: no video (skipped)")
            return
        self.recording = True

    def capture(self, ts: Any) -> None:
        """Keep env 0's frame after this reset or step; stop once its episode has ended (``ts`` shows it)."""
        if not self.recording:
            return
        frame = np.asarray(self._render())
        if frame.ndim != 3 or frame.shape[-1] not in (3, 4) or frame.dtype != np.uint8:
            self.recording = False
            self.note = f"eval.video: the env rendered a frame of shape {frame.shape} {frame.dtype}, not [H, W, 3] uint8"
            return
        stride = max(1, -(-max(frame.shape[:2]) // MAX_SIDE))
        self.frames.append(np.ascontiguousarray(frame[::stride, ::stride, :3]))
        rows = np.flatnonzero(np.asarray(ts.env_id) == 0)
        ended = rows.size > 0 and not np.isnan(np.asarray(ts.episode_return)[rows[0]])
        if ended or len(self.frames) >= self.cfg.eval.video_max_frames:
            self.recording = False

    def write(self, version: int) -> Path | None:
        """Write the frames kept (``videos/version-<v>.gif``, or ``.npz`` without Pillow); None if there are none."""
        if not self.frames:
            return None
        folder = Path(self.cfg.run_dir) / VIDEO_DIR
        folder.mkdir(parents=True, exist_ok=True)
        frames, self.frames = self.frames, []
        try:
            from PIL import Image
        except ImportError:
            path = folder / f"version-{version}.npz"
            np.savez_compressed(path, frames=np.stack(frames))
            return path
        path = folder / f"version-{version}.gif"
        images = [Image.fromarray(f).quantize(colors=256, method=Image.Quantize.FASTOCTREE) for f in frames]
        tmp = path.with_name(f".{path.name}.tmp")
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=1000 // FPS, loop=0)
        tmp.replace(path)
        return path
