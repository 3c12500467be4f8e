"""The parts of the ``codeact`` command line (``codeact.cli``, the entry point, holds the ``codeact``
app, ``run``, ``chat``, ``serve`` and ``worker``): ``_common`` (what the commands share) and
``_sessions`` (the ``codeact sessions`` commands)."""
