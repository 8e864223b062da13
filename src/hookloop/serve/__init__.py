"""Agents behind HTTP: AG-UI over SSE, a plain JSON API and a chat page (``hookloop serve``).

``create_app(build_agent)`` is a Starlette application to run with uvicorn or mount in your
own; ``hookloop serve module:build_agent`` runs it. Needs the ``serve`` extra
(``pip install 'hookloop[serve]'``); importing this module does not, calling ``create_app``
does. See ``docs/serve.md``.
"""

from .._publish import publish as _publish
from ._create import create_app

__all__ = ["create_app"]

_publish(globals(), __all__)
