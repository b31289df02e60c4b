"""cusoftmax: fast, correct softmax for CuPy arrays.

Forward (``softmax``, ``log_softmax``) over CUDA C kernels built on the online
normaliser of Milakov & Gimelshein (2018): a running (max, sum) pair merged by
an associative operator, so the normaliser needs one pass and rows can be split
across threads, blocks and clusters. ``cusoftmax.reference`` holds the float64
NumPy reference of every operation.
"""
from ._api import log_softmax, softmax
from ._backward import softmax_backward, log_softmax_backward
from ._topk import TopK, softmax_topk
from . import reference

__version__ = "0.1.0"
__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
           "softmax_topk", "TopK", "reference", "__version__"]
