"""Self-play: an opponent pool of the learner's snapshots (``pool.py``), prioritized fictitious self-play, Elo
ratings (``elo.py``), evaluation against a game's fixed bots (``bots.py``; a trained run's policy as a bot, ``checkpoint_bot.py``), the single-process loop's opponents
(``opponents.py``), and a league (``league.py``; a member's opponents in the env, ``league_opponent.py``; its files,
``league_records.py``) (``docs/architecture.md``, "Self-play")."""
