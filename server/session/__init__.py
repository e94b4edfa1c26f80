"""One editor connection's state: composes documents, settings, routing and learning."""
