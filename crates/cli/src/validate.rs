//! `edgefit validate`: the estimator against the committed published measurements
//! (`models/validation/`), per point and as MAPE tables with a leave-one-source-out figure.
//! All logic is in `edgefit_estimate::validate`; this prints it.

use anyhow::Result;

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Print the whole validation report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ValidateArgs) -> Result<()> {
    let r = edgefit_estimate::validate::validate()?;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print!("{}", r.render());
    }
    Ok(())
}
