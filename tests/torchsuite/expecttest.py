"""Stand-in for the `expecttest` package (not in Debian 12), which torch's test
helpers (torch.testing._internal.common_utils) import. The distributed suite
uses only what is here: the TestCase base class and the ACCEPT flag. Tests
that would compare against an inline expected string fail loudly instead of
passing silently."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 - expecttest's name
        self.assertEqual(str(actual).strip(), str(expect).strip())
