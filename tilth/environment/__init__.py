"""The project's environment: its interpreter, editable installs, each worktree's set-up."""
