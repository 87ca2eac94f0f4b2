"""The paged MQA logits scorers' torch counterparts that remain (see mxgate.twin.reference)."""
