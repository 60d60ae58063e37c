"""A torch.distributed Store that forwards every call to another: the tests that watch or alter
what a group reads from its store subclass it and override only the calls they change."""

import torch.distributed as dist


class ForwardingStore(dist.Store):
    def __init__(self, inner: dist.Store):
        super().__init__()
        self.inner = inner

    def set(self, key, value):
        self.inner.set(key, value)

    def get(self, key):
        return self.inner.get(key)

    def add(self, key, value):
        return self.inner.add(key, value)

    def compare_set(self, key, expected, desired):
        return self.inner.compare_set(key, expected, desired)

    def check(self, keys):
        return self.inner.check(keys)

    def delete_key(self, key):
        return self.inner.delete_key(key)

    def num_keys(self):
        return self.inner.num_keys()

    def set_timeout(self, timeout):
        self.inner.set_timeout(timeout)

    def wait(self, keys, timeout=None):
        if timeout is None:
            self.inner.wait(keys)
        else:
            self.inner.wait(keys, timeout)
