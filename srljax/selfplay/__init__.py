"""Self-play: an opponent pool of the learner's snapshots, prioritized fictitious self-play, Elo ratings, and
evaluation against a game's fixed bots (``docs/architecture.md``, "Self-play")."""
