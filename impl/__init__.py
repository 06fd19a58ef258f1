"""The shipped implementation (asyncio coordinator and member runtime); see its issue.

Importing it imports the wire library kio, which registers hypothesis strategies
for its types whenever hypothesis is importable (kio/static/_phantom.py);
hypothesis then builds its Unicode tables, about 200 MB at their peak and a
second, into ``./.hypothesis`` of the working directory. A coordinator, a member
or a proxy generates no test data, so unless hypothesis is loaded already (as
in a pytest process with hypothesis's plugin), kio is imported as if hypothesis
were absent; hypothesis stays importable afterwards, but its strategies then
know nothing of kio's types (``st.from_type`` of one fails; nothing here asks it).
"""
import sys

if "hypothesis" not in sys.modules:
    sys.modules["hypothesis"] = None  # `import hypothesis...` raises ImportError while kio loads
    try:
        import kio.static.primitive  # noqa: F401  (imports kio.static._phantom, which tries hypothesis)
    finally:
        del sys.modules["hypothesis"]
