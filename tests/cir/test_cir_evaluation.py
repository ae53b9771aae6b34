"""The method of one composed-retrieval evaluation (gspdml.cir.evaluation.CirMethod): its
checks name the field and the choices, and FreeDom's m follows its variant."""

import pytest

from gspdml.cir.evaluation import METHODS, CirMethod
from gspdml.errors import ConfigError


def test_methods_and_their_checks():
    assert set(METHODS) == {"freedom", "weicom", "text", "image", "product", "sum", "average"}
    with pytest.raises(ConfigError, match="unknown method 'frodom'; choose one of freedom, weicom"):
        CirMethod("frodom")
    with pytest.raises(ConfigError, match="unknown FreeDom variant 'L\\+b'"):
        CirMethod(variant="L+b")
    with pytest.raises(ConfigError, match="query_as_proxy"):
        CirMethod(query_as_proxy="sometimes")
    with pytest.raises(
        ConfigError, match=r"lambda: WeiCom's text weight must lie in \[0, 1\], got 1.5"
    ):
        CirMethod("weicom", lam=1.5)
    # m: given, else the variant's (one label for "single", Eq. 4.7), else 7
    assert (CirMethod(m=3).labels_kept, CirMethod(variant="single").labels_kept) == (3, 1)
    assert CirMethod().labels_kept == CirMethod(variant="L").labels_kept == 7
