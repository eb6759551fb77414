"""The judge as an HTTP service (`codefu serve`): SandboxFusion's /run_code, /judge, on Ray Serve."""
