{#- Named points of a batch where tests make a run wait (cdc_pause_point) or kill it
    (cdc_fault_point, python_hooks/project/faults.py). Nothing happens unless CDC_PAUSE_AT or
    CDC_KILL_AT is set. -#}

{% macro cdc_pause_point(name) %}
    {#- A named point of a batch where a run can be made to wait, for tests of what other processes
        see meanwhile and of a run killed there: CDC_PAUSE_AT=<name> (every model) or
        <name>:<model> makes it sleep up to CDC_PAUSE_SECONDS (default 30) inside the warehouse, in a
        task that holds one executor core. With CDC_PAUSE_RELEASE=<database>, it sleeps 2 s at a time
        and goes on as soon as that database exists (the test creates it when it has seen what it
        wanted), so a generous bound costs nothing. Nothing happens when CDC_PAUSE_AT is unset. -#}
    {%- set wanted = env_var('CDC_PAUSE_AT', '').split(':') -%}
    {%- if wanted[0] == name and (wanted | length == 1 or wanted[1] == this.identifier) -%}
        {%- set seconds = env_var('CDC_PAUSE_SECONDS', '30') | int -%}
        {%- set release = env_var('CDC_PAUSE_RELEASE', '') -%}
        {%- set step = 2 if release else seconds -%}
        {{ log('cdc: pause point ' ~ name ~ ' of ' ~ this ~ ' reached: waiting ' ~ seconds ~ ' s', info=true) }}
        {%- set state = namespace(waited=0, released=false) -%}
        {%- for _ in range(((seconds + step - 1) // step) if step > 0 else 0) -%}
            {%- if not state.released -%}
                {%- set chunk = [step, seconds - state.waited] | min -%}
                {%- do cdc_execute("select reflect('java.lang.Thread', 'sleep', cast(" ~ (chunk * 1000) ~ " as bigint))") -%}
                {%- set state.waited = state.waited + chunk -%}
                {%- if release and run_query('show databases like ' ~ cdc_sql_string(release)) | length > 0 -%}
                    {%- set state.released = true -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
        {{ log('cdc: pause point ' ~ name ~ ' of ' ~ this ~ ' passed' ~ (' (released after ' ~ state.waited ~ ' s)' if state.released else ''), info=true) }}
    {%- endif -%}
{% endmacro %}


{% macro cdc_fault_point(name, relation=none) %}
    {#- A named point of a run where it can be killed, for the fault injection tests
        (tests/pytest/test_faults.py): CDC_KILL_AT=<name> or <name>:<model> logs
        "cdc: kill point <name> of <relation> reached", and the process that runs dbt through
        python_hooks (`make run`) kills itself with SIGKILL when it sees that line
        (python_hooks/project/faults.py): at once, or, for a `during_*` point placed before a statement,
        CDC_KILL_DELAY seconds later (default 1), while the statement runs. Nothing happens when unset. -#}
    {%- set wanted = env_var('CDC_KILL_AT', '').split(':') -%}
    {%- if wanted[0] == name -%}
        {%- set relation = relation if relation is not none else this -%}
        {%- if wanted | length == 1 or wanted[1] == relation.identifier -%}
            {{ log('cdc: kill point ' ~ name ~ ' of ' ~ relation ~ ' reached', info=true) }}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}
