import contract_env

contract_env.register()
