"""Pod-spec rules as pure functions: the Kubernetes Pod Security Standards, gangweb's tenant controls, and the
namespace and level rules the submit and the reconciler both run.
"""
