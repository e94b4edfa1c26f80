"""Next-edit suggestions: the edit after this one, routed like a completion.

`prompt` lays out what the model sees (Zeta's format, or a plain one), `answer` turns
the model's rewritten region into one edit and its confidence, `plan` makes each tier's
request with the planner's `TierRequest`, and `sequence` runs the completion sequence's
steps over them.
"""
