"""The name tensors were pickled under before the tensor API was split by concept: pickles made
then (pickle.dumps of a tensor) name oneflow._tensor_api._rebuild_tensor, which lives on here."""

from oneflow._tensor_methods import _rebuild_tensor  # noqa: F401
