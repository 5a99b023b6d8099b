"""oneflow.support: small helpers OneFlow's public package has (env_var_util)."""
