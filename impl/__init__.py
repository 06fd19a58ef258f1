"""The shipped implementation (asyncio coordinator and member runtime); see its issue."""
