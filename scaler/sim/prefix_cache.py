"""A replica's automatic prefix cache: the prompt blocks its KV cache still holds, by hash.

vLLM V1 caches prompt KV blocks by a hash chained over the block's tokens and every block
before it (``vllm/v1/core/kv_cache_utils.py``, ``hash_block_tokens``), so a request hits the
longest run of leading blocks whose hashes are cached. Freed blocks keep their contents until
their memory is reused, least recently used first (``FreeKVCacheBlockQueue``): the cache holds
at most the KV cache's capacity. Prefix caching is on by default in V1
(``enable_prefix_caching``).

The model here keeps the hashes a trace gives (Mooncake's traces carry one hash per 512
prompt tokens, ``hash_ids``) in one least-recently-used order whose capacity is the KV cache's
tokens. It does not tell blocks in use from free ones: a block in use is the most recently
touched, so it is the last to be evicted, as in vLLM, but its memory is counted once whether
one request holds it or several share it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["PrefixCache"]


class PrefixCache:
    """Cached prompt blocks by hash, least recently used first.

    Args:
        capacity_tokens: the KV cache's capacity, tokens (blocks x block size).

    Raises:
        ValueError: a capacity below 1 token.
    """

    __slots__ = ("_blocks", "_used", "capacity_tokens")

    def __init__(self, capacity_tokens: int) -> None:
        if capacity_tokens < 1:
            raise ValueError(f"capacity_tokens: expected >= 1, got {capacity_tokens}")
        self.capacity_tokens = capacity_tokens
        # hash -> tokens the block holds; insertion order is recency (oldest first)
        self._blocks: OrderedDict[int, int] = OrderedDict()
        self._used = 0

    def __len__(self) -> int:
        return len(self._blocks)

    @property
    def used_tokens(self) -> int:
        """Tokens of the cached blocks."""
        return self._used

    def lookup(self, hashes: Sequence[int], block_tokens: int) -> int:
        """Tokens of the longest cached prefix of ``hashes`` (each block ``block_tokens``
        tokens); the hit blocks become the most recently used."""
        hit = 0
        blocks = self._blocks
        for h in hashes:
            if h not in blocks:
                break
            blocks.move_to_end(h)
            hit += 1
        return hit * block_tokens

    def insert(self, hashes: Sequence[int], block_tokens: int) -> None:
        """Cache the blocks ``hashes`` (a prompt whose prefill completed), most recent last;
        the least recently used blocks are evicted to stay within the capacity."""
        blocks = self._blocks
        for h in hashes:
            if h in blocks:
                blocks.move_to_end(h)
                continue
            blocks[h] = block_tokens
            self._used += block_tokens
        while self._used > self.capacity_tokens and blocks:
            _, tokens = blocks.popitem(last=False)
            self._used -= tokens

    def clear(self) -> None:
        """Forget every block (the KV cache was discarded: sleep, restart)."""
        self._blocks.clear()
        self._used = 0
