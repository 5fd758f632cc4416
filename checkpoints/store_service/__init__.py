"""The store as a service: `/store/v1/`, the remote saver's calls run through the store
contract (`views`), who may make them (`access`), values as the client's bytes (`values`)."""
