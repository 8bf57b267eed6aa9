"""The terminal chat: its screen, its line editor and its slash commands."""
