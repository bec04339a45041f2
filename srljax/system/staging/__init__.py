"""Between actors and trainers: ``buffer.py`` (``BufferWorker``, joins segments) and ``replay_buffer.py``
(``ReplayBufferWorker``, one shard of Ape-X's prioritized replay)."""
